"""Maps between classifier outputs and the real line on which the mixture is fitted.

The public names of the transducer's output encoding
(:mod:`yieldwise.transducer.encoding`, where they live and are documented).
"""

from __future__ import annotations

from .transducer.encoding import OutputTransform, choose_transform

__all__ = ["OutputTransform", "choose_transform"]
