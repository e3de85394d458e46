"""`import lancedb` without the REST namespace client that a local index never calls.

`lancedb.db` imports `lance_namespace`, whose package `lance_namespace_urllib3_client` (a
generated REST client) imports every endpoint in its `__init__`, and each endpoint builds a
pydantic validator as it is defined: two thirds of what `import lancedb` costs (the figures:
docs/benchmarks.md, "Run overhead"), paid by every cold search and every run that writes
the index. `lance_namespace` itself only needs the client's `models` submodule.

So the client's package is registered without running its `__init__`: its submodules import
as usual, and the first attribute read from the package itself runs the real `__init__`,
so a REST namespace (`lancedb.connect_namespace`) still gets the whole client. Python's
`importlib.util.LazyLoader` cannot do this: importing any submodule reads the package's
`__path__`, which makes a lazy module load in full.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
from types import ModuleType

CLIENT = "lance_namespace_urllib3_client"


def import_lancedb() -> ModuleType:
    """`lancedb`, imported with `CLIENT`'s `__init__` deferred (a loaded lancedb has loaded
    `CLIENT` already, which `defer_client` leaves as it is)."""
    defer_client()
    import lancedb

    return lancedb


def defer_client() -> None:
    """Register `CLIENT` with its `__init__` run on the first read of a name the package
    lacks; nothing if it is imported already."""
    if CLIENT not in sys.modules:
        _defer_init(CLIENT)


def _defer_init(name: str) -> None:
    """Package `name` in `sys.modules`, its `__init__` run by the first read of a name it lacks."""
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return  # not an installed package: the import fails or succeeds as it would anyway
    package = importlib.util.module_from_spec(spec)
    loader = spec.loader
    lock = threading.Lock()

    def __getattr__(attr: str) -> object:  # PEP 562: only names not yet in the module
        with lock:
            if package.__dict__.get("__getattr__") is __getattr__:
                del package.__dict__["__getattr__"]
                loader.exec_module(package)
        return getattr(package, attr)  # the module's own lookup now, AttributeError included

    package.__dict__["__getattr__"] = __getattr__
    sys.modules[name] = package
