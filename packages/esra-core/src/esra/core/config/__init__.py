"""Tenant-scoped configuration: sources, mappings, capabilities, exposures, snapshots."""

from esra.core.config.access_policy import AccessPolicy
from esra.core.config.capability import (
    BindingMode,
    Capability,
    CapabilityLimits,
    RerankWeights,
    ResponseMode,
    SourceBinding,
)
from esra.core.config.ceilings import LimitCeilings
from esra.core.config.converter import CONVERTER, dump_snapshot, load_snapshot
from esra.core.config.exposure import Exposure, RetentionClass
from esra.core.config.mapping import (
    DefaultTemplate,
    FieldSpec,
    FieldType,
    Mapping,
    MaskingKind,
    MaskingRule,
    Operator,
    RecordFilter,
)
from esra.core.config.record_filter_template import (
    RecordFilterTemplate,
    parse_record_filter_template,
)
from esra.core.config.snapshot import ConfigSnapshot
from esra.core.config.source import (
    DEFAULT_MAX_QUERIES_PER_SOURCE,
    MAX_QUERIES_PER_SOURCE_CEILING,
    LifecycleState,
    Source,
    SourceHealth,
    SourcePolicy,
    clamp_max_queries,
)

__all__ = [
    "CONVERTER",
    "DEFAULT_MAX_QUERIES_PER_SOURCE",
    "MAX_QUERIES_PER_SOURCE_CEILING",
    "AccessPolicy",
    "BindingMode",
    "Capability",
    "CapabilityLimits",
    "ConfigSnapshot",
    "DefaultTemplate",
    "Exposure",
    "FieldSpec",
    "FieldType",
    "LifecycleState",
    "LimitCeilings",
    "Mapping",
    "MaskingKind",
    "MaskingRule",
    "Operator",
    "RecordFilter",
    "RecordFilterTemplate",
    "RerankWeights",
    "ResponseMode",
    "RetentionClass",
    "Source",
    "SourceBinding",
    "SourceHealth",
    "SourcePolicy",
    "clamp_max_queries",
    "dump_snapshot",
    "load_snapshot",
    "parse_record_filter_template",
]
