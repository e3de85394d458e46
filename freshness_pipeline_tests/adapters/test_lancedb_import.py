"""`import_lancedb`: the store works without the REST namespace client's endpoints, which
still load, whole, when something asks the client's package for them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

# A fresh interpreter: in the test process another test may have imported lancedb already.
SCRIPT = """
import json, sys
from freshness_pipeline.adapters.vectorstores.base import VectorRecord
from freshness_pipeline.adapters.vectorstores.lancedb_store import LanceDBStore

store = LanceDBStore(sys.argv[1])
records = [
    VectorRecord(f"https://docs.example/p{i}#a:0", [float(i == j) for j in range(4)],
                 {"url": f"https://docs.example/p{i}", "key": f"p{i}#a", "content_hash": f"h{i}",
                  "text": words, "retrieval_text": words, "source": "docs", "chunk_index": 0})
    for i, words in enumerate(["request timeout settings", "response streaming", "proxy setup"])
]
store.upsert("docs", records)
store.mark_committed("docs")
vector_hits, text_hits = store.hybrid_query("docs", [1.0, 0.0, 0.0, 0.0], "timeout", 2, committed=True)
loaded = sorted(m for m in sys.modules if m.startswith("lance_namespace_urllib3_client.api"))
from lance_namespace_urllib3_client import TableApi
print(json.dumps({
    "vector": [h.id for h in vector_hits], "text": [h.id for h in text_hits],
    "endpoints_before": loaded, "table_api": TableApi.__module__,
    "endpoints_after": "lance_namespace_urllib3_client.api.namespace_api" in sys.modules,
}))
"""


def test_the_store_runs_without_the_rest_clients_endpoints_which_load_when_asked_for(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "vectors")], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.splitlines()[-1])
    assert seen["vector"][0] == "https://docs.example/p0#a:0"
    assert seen["text"] == ["https://docs.example/p0#a:0"]
    assert seen["endpoints_before"] == []
    assert seen["table_api"] == "lance_namespace_urllib3_client.api.table_api"
    assert seen["endpoints_after"] is True
