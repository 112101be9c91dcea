"""Property: after any sequence of applies, the store holds exactly what a simple model of
ownership says (a file owns what it last declared; declaring another file's object moves it), and
an apply never touches other files' objects it does not declare."""

from __future__ import annotations

from admission_builders import ADMIN, service
from hypothesis import given, settings
from hypothesis import strategies as st

from ccattler.engine.admission.operations import apply_compiled
from ccattler.engine.store import open_store

FILES = ("a.cca", "b.cca", "c.cca")
NAMES = tuple(f"svc{i}" for i in range(6))

applies = st.lists(
    st.tuples(st.sampled_from(FILES), st.sets(st.sampled_from(NAMES)), st.integers(1, 3)),
    min_size=1, max_size=8,
)


@settings(max_examples=40, deadline=None)
@given(applies)
def test_each_file_owns_what_it_last_declared(steps):
    model: dict[str, tuple[str, int]] = {}  # service → (owning file, instances)
    with open_store("sqlite://:memory:") as store:
        for source, names, instances in steps:
            compiled = dict(service(n, source=source, instances=instances) for n in names)
            before = {f.key: f.value for f in store.range("desired/")[0]}
            apply_compiled(store, ADMIN, compiled, {source})
            after = {f.key: f.value for f in store.range("desired/")[0]}
            for key, doc in before.items():
                if doc["source"] != source and key not in compiled:
                    assert after.get(key) == doc, f"applying {source} touched {key} of {doc['source']}"
            model = {n: owner for n, owner in model.items() if owner[0] != source}
            model.update({n: (source, instances) for n in names})
        stored = {f.value["name"]: (f.value["source"], f.value["instances"])
                  for f in store.range("desired/")[0]}
        assert stored == model
