"""segmentstore package."""
