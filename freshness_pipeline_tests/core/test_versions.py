from freshness_pipeline.core.state import SourceState
from freshness_pipeline.core.versions import Versions, namespace, page_signature, template_hash

V = Versions(normalizer="n1", chunker="c1", model="m", dims=384)


def test_differences_name_what_changed() -> None:
    state = SourceState("docs", normalizer_version="n1", chunker_version="c0", embed_model="m", embed_dims=768)
    assert V.differences(state) == ["chunker c0 -> c1", "dimensions 768 -> 384"]
    same = SourceState("docs", normalizer_version="n1", chunker_version="c1", embed_model="m", embed_dims=384)
    assert V.differences(same) == []


def test_page_signature_follows_text_title_template_and_rules() -> None:
    base = page_signature("h", "Title", template_hash(["a", "b"]), V)
    assert page_signature("h", "Title", template_hash(["b", "a"]), V) == base  # block order is not a change
    changed = [
        page_signature("h2", "Title", template_hash(["a", "b"]), V),
        page_signature("h", "Other", template_hash(["a", "b"]), V),
        page_signature("h", "Title", template_hash(["a"]), V),
        page_signature("h", "Title", template_hash(["a", "b"]), Versions("n2", "c1", "m", 384)),
        page_signature("h", "Title", template_hash(["a", "b"]), Versions("n1", "c2", "m", 384)),
    ]
    assert base not in changed and len(set(changed)) == len(changed)
    # The model is not part of a page's sections: a new model re-embeds, it does not re-segment.
    assert page_signature("h", "Title", template_hash(["a", "b"]), Versions("n1", "c1", "m2", 768)) == base


def test_namespace() -> None:
    assert namespace("docs", 3) == "docs-v3"
