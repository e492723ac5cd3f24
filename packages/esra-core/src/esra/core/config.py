"""Tenant-scoped configuration: sources, mappings, capabilities, exposures, snapshots."""

from esra.core._config.access_policy import AccessPolicy
from esra.core._config.capability import (
    BindingMode,
    Capability,
    CapabilityLimits,
    RerankWeights,
    ResponseMode,
    SourceBinding,
)
from esra.core._config.ceilings import LimitCeilings
from esra.core._config.connection_credentials import (
    check_no_literal_password,
    holds_literal_password,
)
from esra.core._config.converter import CONVERTER, dump_snapshot, load_part, load_snapshot
from esra.core._config.exposure import Exposure, RetentionClass
from esra.core._config.mapping import (
    DefaultTemplate,
    FieldSpec,
    FieldType,
    Mapping,
    MaskingKind,
    MaskingRule,
    Operator,
    RecordFilter,
)
from esra.core._config.record_filter_template import (
    And,
    ClaimRef,
    Comparison,
    InClaim,
    InList,
    IsNull,
    Literal,
    Not,
    Or,
    RecordFilterTemplate,
    parse_record_filter_template,
)
from esra.core._config.snapshot import ConfigSnapshot
from esra.core._config.source import (
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
    "And",
    "BindingMode",
    "Capability",
    "CapabilityLimits",
    "ClaimRef",
    "Comparison",
    "ConfigSnapshot",
    "DefaultTemplate",
    "Exposure",
    "FieldSpec",
    "FieldType",
    "InClaim",
    "InList",
    "IsNull",
    "LifecycleState",
    "LimitCeilings",
    "Literal",
    "Mapping",
    "MaskingKind",
    "MaskingRule",
    "Not",
    "Operator",
    "Or",
    "RecordFilter",
    "RecordFilterTemplate",
    "RerankWeights",
    "ResponseMode",
    "RetentionClass",
    "Source",
    "SourceBinding",
    "SourceHealth",
    "SourcePolicy",
    "check_no_literal_password",
    "clamp_max_queries",
    "dump_snapshot",
    "holds_literal_password",
    "load_part",
    "load_snapshot",
    "parse_record_filter_template",
]
