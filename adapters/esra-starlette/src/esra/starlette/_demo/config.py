"""The demo tenant's configuration: three sources, four mappings, one capability, one exposure."""

from __future__ import annotations

from esra.core import CallerIdentity, InvocationContext
from esra.core.config import (
    AccessPolicy,
    BindingMode,
    Capability,
    ConfigSnapshot,
    Exposure,
    FieldSpec,
    FieldType,
    Mapping,
    MaskingKind,
    MaskingRule,
    Operator,
    RecordFilter,
    Source,
    SourceBinding,
)

__all__ = [
    "CLIENT_APP",
    "SLUG",
    "TENANT",
    "demo_context",
    "demo_snapshot",
]

TENANT = "larkspur"
CLIENT_APP = "demo-client"
SLUG = "larkspur"

_RANGE = frozenset({Operator.EQ, Operator.LT, Operator.LTE, Operator.GT, Operator.GTE})
_CHOICE = frozenset({Operator.EQ, Operator.NE, Operator.IN})


def _text(name: str, column: str, *, searchable: bool = True, description: str = "") -> FieldSpec:
    return FieldSpec(
        name=name,
        column=column,
        is_searchable=searchable,
        is_returnable=True,
        description=description,
    )


def _choice(name: str, column: str, description: str) -> FieldSpec:
    return FieldSpec(
        name=name,
        column=column,
        is_filterable=True,
        is_returnable=True,
        allowed_operators=_CHOICE,
        description=description,
    )


def _date(name: str, column: str, description: str) -> FieldSpec:
    return FieldSpec(
        name=name,
        column=column,
        type=FieldType.DATE,
        is_filterable=True,
        is_returnable=True,
        allowed_operators=_RANGE,
        description=description,
    )


def _sources() -> tuple[Source, ...]:
    return (
        Source(
            id="catalog",
            tenant_id=TENANT,
            name="Product catalog",
            description="Every bike, e-bike, accessory and spare part Larkspur Cycles sells, "
            "with descriptions, categories and prices.",
            usage_guidance="Questions about products, models, specifications, prices and "
            "which bike suits a purpose.",
            exclusion_guidance="Not for customer problems, orders or employee matters.",
            domain_tags=("products", "bikes", "e-bikes", "accessories", "spare parts"),
            example_prompts=("Which gravel bike takes wide tyres?", "How much is the cargo bike?"),
            freshness="updated when the catalog changes",
            provider_kind="sqlite",
            connection_ref="catalog.db",
        ),
        Source(
            id="support",
            tenant_id=TENANT,
            name="Customer support desk",
            description="Customer support tickets about problems with bikes and orders, and "
            "the knowledge-base articles agents use to solve them.",
            usage_guidance="Customer problems, defects, repairs, refunds, returns, warranty "
            "claims, deliveries and troubleshooting.",
            exclusion_guidance="Not for employee policies or product prices.",
            domain_tags=("support", "tickets", "troubleshooting", "warranty", "refunds"),
            example_prompts=("Battery not charging", "How do I get a refund?"),
            freshness="tickets update continuously",
            provider_kind="sqlite",
            connection_ref="support.db",
            max_queries_per_source=4,
        ),
        Source(
            id="hr",
            tenant_id=TENANT,
            name="HR handbook",
            description="Larkspur Cycles' employee handbook: leave, remote work, expenses, "
            "benefits, reviews and security policies.",
            usage_guidance="Questions employees ask about their leave, pay, benefits, travel "
            "and workplace rules.",
            exclusion_guidance="Not for customers or products.",
            domain_tags=("hr", "policies", "employees", "benefits", "leave"),
            example_prompts=("How many vacation days do I get?", "Can I work from home?"),
            freshness="reviewed yearly",
            provider_kind="sqlite",
            connection_ref="hr.db",
        ),
    )


def _mappings() -> tuple[Mapping, ...]:
    products = Mapping(
        id="products",
        tenant_id=TENANT,
        source_id="catalog",
        business_name="Products",
        description="One record per product with its name, category, description and price.",
        relation="products",
        text_index="products_fts",
        record_key="sku",
        title_field="name",
        content_fields=("description",),
        freshness_field="updated",
        fields=(
            _text("name", "name", description="product name"),
            _text("description", "description", description="what the product is"),
            _choice("category", "category", "road bike, gravel bike, electric bike, ..."),
            FieldSpec(
                name="price",
                column="price_eur",
                type=FieldType.NUMBER,
                is_filterable=True,
                is_returnable=True,
                allowed_operators=_RANGE,
                description="retail price in EUR",
            ),
            FieldSpec(name="cost", column="cost_eur", type=FieldType.NUMBER, is_restricted=True),
            _date("updated", "updated", "when the catalog entry last changed"),
        ),
    )
    tickets = Mapping(
        id="tickets",
        tenant_id=TENANT,
        source_id="support",
        business_name="Support tickets",
        description="Customer support tickets: subject, description, status and product.",
        relation="tickets",
        text_index="tickets_fts",
        record_key="ticket_id",
        title_field="subject",
        content_fields=("description",),
        freshness_field="opened",
        masking=(MaskingRule(field="customer", kind=MaskingKind.EMAIL),),
        record_filters=(RecordFilter(field="region", claim="region", operator=Operator.IN),),
        fields=(
            _text("subject", "subject", description="the customer's summary"),
            _text("description", "body", description="the customer's full description"),
            _choice("status", "status", "open, pending, escalated or resolved"),
            _choice("product", "sku", "the product's SKU"),
            FieldSpec(name="region", column="region", allowed_operators=_CHOICE),
            FieldSpec(name="customer", column="customer_email", is_returnable=True),
            FieldSpec(name="internal_notes", column="internal_notes", is_restricted=True),
            _date("opened", "opened", "when the ticket was opened"),
        ),
    )
    articles = Mapping(
        id="kb_articles",
        tenant_id=TENANT,
        source_id="support",
        business_name="Knowledge-base articles",
        description="How-to and policy articles support agents use to solve tickets.",
        relation="kb_articles",
        text_index="kb_articles_fts",
        record_key="article_id",
        title_field="title",
        content_fields=("body",),
        freshness_field="updated",
        fields=(
            _text("title", "title", description="article title"),
            _text("body", "body", description="article text"),
            _date("updated", "updated", "when the article last changed"),
        ),
    )
    policies = Mapping(
        id="policies",
        tenant_id=TENANT,
        source_id="hr",
        business_name="HR policies",
        description="One record per handbook policy with its owner team.",
        relation="policies",
        text_index="policies_fts",
        record_key="policy_id",
        title_field="title",
        content_fields=("body",),
        freshness_field="updated",
        fields=(
            _text("title", "title", description="policy title"),
            _text("body", "body", description="policy text"),
            _choice("owner", "owner_team", "the team that owns the policy"),
            _date("updated", "updated", "when the policy was last reviewed"),
        ),
    )
    return (products, tickets, articles, policies)


def demo_snapshot() -> ConfigSnapshot:
    """Return the demo tenant's configuration snapshot."""
    capability = Capability(
        id="enterprise_search",
        tenant_id=TENANT,
        name="Enterprise search",
        bindings=(
            SourceBinding("catalog", BindingMode.OPTIONAL),
            SourceBinding("support", BindingMode.OPTIONAL),
            SourceBinding("hr", BindingMode.OPTIONAL),
        ),
    )
    exposure = Exposure(
        id="larkspur-exposure",
        tenant_id=TENANT,
        slug=SLUG,
        capability_id=capability.id,
        audience=frozenset({CLIENT_APP}),
        published=True,
        top_k=5,
        fragment_chars=220,
    )
    return ConfigSnapshot(
        tenant_id=TENANT,
        version="demo-1",
        sources=_sources(),
        mappings=_mappings(),
        capabilities=(capability,),
        exposures=(exposure,),
        access_policies=(AccessPolicy.matching(exposure),),
    )


def demo_context(correlation_id: str, *, regions: tuple[str, ...] = ("emea",)) -> InvocationContext:
    """Return the demo caller: a support agent for ``regions`` (the tickets' record filter)."""
    return InvocationContext(
        tenant_id=TENANT,
        client_app_id=CLIENT_APP,
        caller=CallerIdentity(subject="demo-agent", claims={"region": regions}),
        exposure_slug=SLUG,
        correlation_id=correlation_id,
    )
