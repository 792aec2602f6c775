"""A client application traced with the OpenTelemetry Python SDK: its own
span around an OpenAI SDK call through Switchyard, the span's W3C context
sent with the call. Started by tests/tests/tracing.rs, which sets
SWITCHYARD_URL and OTEL_EXPORTER_OTLP_ENDPOINT (its test collector).
Prints the client span's ids and the answer as JSON."""

import json
import os

import openai
from opentelemetry import propagate, trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

provider = TracerProvider(resource=Resource.create({"service.name": "client-app"}))
# The endpoint comes from OTEL_EXPORTER_OTLP_ENDPOINT, as for any application.
provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter()))
trace.set_tracer_provider(provider)
tracer = trace.get_tracer("client-app")

client = openai.OpenAI(base_url=os.environ["SWITCHYARD_URL"] + "/v1", api_key="sk-local-client", timeout=10.0)
with tracer.start_as_current_span("ask the model") as span:
    carrier = {}
    propagate.inject(carrier)
    answer = client.chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": "Say hello"}],
        extra_headers=carrier,
    )
    context = span.get_span_context()
    print(
        json.dumps(
            {
                "trace_id": format(context.trace_id, "032x"),
                "span_id": format(context.span_id, "016x"),
                "content": answer.choices[0].message.content,
            }
        )
    )
provider.shutdown()
