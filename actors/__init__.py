"""Thin Ray shells around the core objects of pravega_ray (see docs/design.md, "Layers")."""
