"""Projections: pure folds over a session's entries (imports only the domain)."""

from sessiontree.projections.base import (
    FunctionProjection,
    LabelsProjection,
    LeafProjection,
    Projection,
    SessionNameProjection,
    TreeProjection,
    fold,
)
from sessiontree.projections.context import SessionContext, SessionContextBuildOptions, build_session_context
from sessiontree.projections.stats import SessionStats, StatsProjection

__all__ = [
    "FunctionProjection", "LabelsProjection", "LeafProjection", "Projection", "SessionContext", "SessionContextBuildOptions",
    "SessionNameProjection", "SessionStats", "StatsProjection", "TreeProjection", "build_session_context", "fold",
]
