"""Whole-picture stages that run after the faces (super-resolution)."""
