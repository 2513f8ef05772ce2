"""The write-back loop every backend runs: fold the intents into the state, refuse, send.

Lite, the DataHub backend and the MCP backend all make a catalog hold a list of
:data:`~mlcopilot.model.Write` intents by the same rule (:func:`fold`), so the same writes
report the same changes everywhere; they differ only in how the result is stored. The two GMS
backends also share the refusal of aspects DataHub's registry does not have
(:func:`check_writable`), the gate on Documents (:func:`gate_documents`) and the UPSERT/PATCH
send (:func:`send`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from mlcopilot.catalog import aspects as ax
from mlcopilot.catalog import urns
from mlcopilot.catalog.datahub.client import GmsClient
from mlcopilot.catalog.proposals import proposals
from mlcopilot.errors import CatalogError
from mlcopilot.model import DocumentWrite, Urn, Write

log = logging.getLogger(__name__)

State = Mapping[Urn, Mapping[str, ax.JsonObject]]
"""What a catalog holds of the entities a write-back touches: urn → aspect name → JSON."""
AspectKey = tuple[Urn, str]
OwnAspects = Callable[[Write, ax.Aspects], dict[str, ax.JsonObject]]
"""How a backend turns one intent into its target's changed aspects (default
:func:`~mlcopilot.catalog.aspects.aspects_for_write`)."""


@dataclass(frozen=True, slots=True)
class Fold:
    """What a list of intents changes, folded in order into the state it was compared with."""

    changed: list[Write]
    """The intents that change something, in order."""
    pending: dict[AspectKey, ax.JsonObject]
    """The aspect values to end with, each once (a later intent on the same aspect wins)."""
    before: State
    """The state the intents were compared with (not altered by the fold)."""

    def read(self) -> dict[AspectKey, ax.JsonObject | None]:
        """The value each pending aspect had before (None: absent), which a PATCH diffs from."""
        return {(urn, name): self.before.get(urn, {}).get(name) for urn, name in self.pending}

    def documents(self) -> dict[Urn, DocumentWrite]:
        """The changed document intents by urn (the last one of an urn wins)."""
        return {w.urn: w for w in self.changed if isinstance(w, DocumentWrite)}


def state_needs(writes: Iterable[Write]) -> list[Urn]:
    """The entities whose state :func:`fold` compares ``writes`` with: targets, prerequisites."""
    writes = list(writes)
    needs = [ax.write_target(w) for w in writes]
    needs += [urn for w in writes for urn in ax.write_prerequisites(w)]
    return list(dict.fromkeys(needs))


def fold(writes: Sequence[Write], state: State, *, own: OwnAspects | None = None) -> Fold:
    """Fold ``writes`` in order into ``state``: each sees what the ones before it changed.

    Raises:
        CatalogError: when a write cannot be turned into valid aspects.
    """
    current = {urn: dict(aspects) for urn, aspects in state.items()}
    pending: dict[AspectKey, ax.JsonObject] = {}
    changed: list[Write] = []
    for write in writes:
        updates = ax.write_updates(write, current, own=own)
        for urn, name, value in updates:
            current.setdefault(urn, {})[name] = value
            pending[(urn, name)] = value
        if updates:
            changed.append(write)
    return Fold(changed=changed, pending=pending, before=state)


def check_writable(pending: Iterable[AspectKey]) -> None:
    """Refuse an aspect DataHub's entity registry does not give the entity's type.

    GMS answers 422 for it, possibly after writing the rest of the batch; refusing up front
    keeps a write-back all or nothing, and a dry run refuses what the real one would.
    """
    for urn, name in pending:
        entity_type = urns.urn_type(urn) or ""
        allowed = urns.registry_aspects(entity_type)
        if allowed is not None and name not in allowed:
            raise CatalogError(
                f"cannot write {name} on {urn}: DataHub has no such aspect on {entity_type}"
            )


def gate_documents(
    writes: Sequence[Write], gms: GmsClient, label: str
) -> tuple[list[Write], tuple[Write, ...]]:
    """``(writes to make, documents skipped)``: a server before 1.4 has no Document entity."""
    documents = tuple(w for w in writes if isinstance(w, DocumentWrite))
    if not documents or gms.supports_documents():
        return list(writes), ()
    log.warning(
        "%s: DataHub %s has no Document entity (needs 1.4 or later); skipped %d document write(s)",
        label,
        gms.version() or "(version unknown)",
        len(documents),
    )
    return [w for w in writes if not isinstance(w, DocumentWrite)], documents


def send(
    gms: GmsClient,
    label: str,
    pending: Mapping[AspectKey, ax.JsonObject],
    read: Mapping[AspectKey, ax.JsonObject | None],
) -> None:
    """Write ``pending`` to GMS: tags and properties as PATCHes from ``read``, the rest whole."""
    if not pending:
        return
    check_writable(pending)
    try:
        mcps = proposals(pending, read)
    except CatalogError as exc:
        raise CatalogError(f"{label}: {exc}") from exc
    gms.emit(mcps)
