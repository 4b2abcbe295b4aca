"""Thin Ray shells around the core objects of pravega_ray (see ARCHITECTURE.md §2)."""
