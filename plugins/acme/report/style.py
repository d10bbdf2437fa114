"""How the report's figures look on every page and section: sizes, resolution, fonts, line styles."""

from __future__ import annotations

REFERENCE_STYLE = {"linestyle": "--", "linewidth": 1.4, "alpha": 0.85}
OWN_STYLE = {"linewidth": 2.4, "color": "black"}
# Figures are drawn FIGURE_WIDTH_IN wide at DPI and shown at 1/PIXEL_RATIO of their pixels, so a
# figure fills the page (1050 CSS px) and stays sharp on HiDPI screens.
FIGURE_WIDTH_IN = 10.5
PIXEL_RATIO = 2
DPI = 100 * PIXEL_RATIO
LEGEND_FONT = 9
