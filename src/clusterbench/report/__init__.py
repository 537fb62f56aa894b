"""Rendering: console (rich), markdown, html."""
