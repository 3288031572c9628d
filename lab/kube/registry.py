"""The store the API serves: the object store with its write, delete and seeding paths wired in.

Role: :class:`Registry` is a ``Store`` (``store.py``: revisions, objects, history, lists and
watches) that also carries ``writer`` (``writes.py``: create, update, patch) and ``deleter``
(``deletion.py``), seeds a fresh cluster at start and on every reset (``seed.py``) and runs the
apiserver's endpoint reconciler after each commit that touches ``default/kubernetes``
(``apiserver_endpoints.py``) and its system-namespaces controller after a system namespace
(``kube-node-lease``: the others may not be deleted) is gone. The server, the handlers and
``/_lab`` use it; read-only neighbours (watch streams, auth, wire) take the plain ``Store`` it is.

Design: named after kube-apiserver's generic registry (``registry/generic/registry.Store``),
which puts create, update and delete with their strategies over the storage layer. The core
store knows nothing of the paths built on it; this module is the one place that composes them,
so every import in between runs one way (store <- deletion <- writes <- seed <- registry).
"""

from __future__ import annotations

from lab.kube import apiserver_endpoints, authentication_trust
from lab.kube.deletion import Deleter
from lab.kube.objects import Obj, rt_key
from lab.kube.resources import RESOURCES, ResourceType
from lab.kube.seed import namespace_companions, seed_defaults
from lab.kube.store import Store, WatchWindow
from lab.kube.writes import Writer

#: what pkg/controlplane/controller/systemnamespaces keeps in existence (``default`` too, by
#: the kubernetes-service controller); all but kube-node-lease are immortal anyway
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


class Registry(Store):
    """All API objects of one simulated cluster, with the paths that write them."""

    def __init__(
        self,
        *,
        resources: tuple[ResourceType, ...] = RESOURCES,
        service_cidr: str = "10.96.0.0/16",
        node_port_range: tuple[int, int] = (30000, 32767),
        history: int = 20000,
        window: WatchWindow | None = None,
        seed: bool = True,
        fake_kubelet: bool = False,
    ) -> None:
        super().__init__(
            resources=resources,
            service_cidr=service_cidr,
            node_port_range=node_port_range,
            history=history,
            window=window,
            fake_kubelet=fake_kubelet,
        )
        self._seed = seed
        self.deleter = Deleter(self)
        self.writer = Writer(self, self.deleter)
        self.writer.on_namespace_created = self._namespace_created
        self._reconciling = False  # the apiserver's endpoint reconciler is writing
        self._seed_defaults()

    def reset(self) -> None:
        """Forget every object and all history; seed a fresh cluster again (unless told not)."""
        with self.lock:
            super().reset()
            self._seed_defaults()

    def _seed_defaults(self) -> None:
        if self._seed:
            with self.lock:
                seed_defaults(self.writer)

    def publish_ca(self) -> None:
        """The server's CA is known (``ca_pem`` set at start): kube-controller-manager's root
        CA publisher rewrites every ``kube-root-ca.crt`` that differs, and the cluster
        authentication trust controller its ConfigMap."""
        with self.lock:
            cm = self.by_key[("", "configmaps")]
            for (ns, name), entry in list(self._t.objects[("", "configmaps")].items()):
                data = entry.obj.get("data") or {}
                if name == "kube-root-ca.crt" and data.get("ca.crt") != self.ca_pem:
                    new = {**entry.obj, "data": {**data, "ca.crt": self.ca_pem}}
                    self.writer.update(cm, ns, name, new, manager="kube-controller-manager")
            authentication_trust.reconcile(self.writer)

    def _namespace_created(self, ns: str) -> None:
        namespace_companions(self.writer, ns)

    def commit(self, rt: ResourceType, etype: str, obj: Obj, old: Obj | None) -> Obj:
        """``Store.commit``, then kube-apiserver's endpoint reconciler (run on write instead of
        every 10 s) when the commit touched the objects it keeps."""
        stored = super().commit(rt, etype, obj, old)
        meta = obj["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        if etype == "DELETED" and rt_key(rt) == ("", "namespaces") and key[1] in SYSTEM_NAMESPACES:
            # kube-apiserver's system-namespaces controller (once a minute upstream) creates
            # them again; here at once, so a lab's node leases always have their namespace
            self.writer.create(rt, "", {"metadata": {"name": key[1]}}, manager="kube-apiserver")
        if authentication_trust.concerns(rt_key(rt), key) and not self._reconciling:
            self._reconciling = True
            try:
                authentication_trust.reconcile(self.writer)
            finally:
                self._reconciling = False
        if apiserver_endpoints.concerns(rt_key(rt), key) and not self._reconciling:
            self._reconciling = True
            try:
                apiserver_endpoints.reconcile(self.writer)
            finally:
                self._reconciling = False
        return stored
