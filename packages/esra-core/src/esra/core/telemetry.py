"""ESRA's telemetry conventions, for adapters that add spans, metrics or usage.

Attribute names, the meter every ESRA instrument comes from, and the report of a
remote model call's token usage into the current invocation.
"""

from esra.core._model_usage import ModelUsage, report_model_usage
from esra.core._telemetry import TENANT_ID, current_span_tenant, invocation_attributes, meter

__all__ = [
    "TENANT_ID",
    "ModelUsage",
    "current_span_tenant",
    "invocation_attributes",
    "meter",
    "report_model_usage",
]
