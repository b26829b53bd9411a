"""Projections: pure folds over a session's entries (imports only the domain)."""

from sessiontree.projections.base import FunctionProjection, Projection, fold
from sessiontree.projections.context import SessionContext, SessionContextBuildOptions, build_session_context
from sessiontree.projections.labels import LabelsProjection
from sessiontree.projections.leaf import LeafProjection
from sessiontree.projections.names import SessionNameProjection
from sessiontree.projections.stats import SessionStats, StatsProjection
from sessiontree.projections.tree import TreeProjection

__all__ = [
    "FunctionProjection", "LabelsProjection", "LeafProjection", "Projection", "SessionContext", "SessionContextBuildOptions",
    "SessionNameProjection", "SessionStats", "StatsProjection", "TreeProjection", "build_session_context", "fold",
]
