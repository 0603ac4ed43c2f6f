"""``Firewall``: the one object the write path and recall consult.

Write side (``admit_write`` → ``screen``): the provenance claim is checked against the
writer-key registry (400 for a malformed claim, 403 for a signature that does not verify
or a user claim that must be signed and is not), the text is scanned for instruction
shapes and term stuffing, and an attribute statement is compared with what the scope
already holds. The answer is the lifecycle the record is stored with (``draft`` =
held for the user) and why.

Read side (``trust``): what a stored record's provenance is worth, cached per record
(records are immutable, so a knowledge id's trust only changes with the key registry,
whose generation is part of the cache key).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from amcp.amf.types import Lifecycle
from amcp.errors import ForbiddenError, ValidationError
from amcp.firewall import contradiction, density, detector
from amcp.firewall.keys import WriterKeys
from amcp.firewall.provenance import Origin, Provenance, of_record, payload, signed_text
from amcp.firewall.trust import Trust, Verification

if TYPE_CHECKING:
    from amcp.amf.record import AMFRecord

# Candidates for a contradiction: records of the same scope that may state the same claim —
# by subject for a triple claim, else by a lexical search for the attribute's words (given
# by the write path, which owns the store and the searcher).
Related = Callable[["AMFRecord", contradiction.Claim], Iterable["AMFRecord"]]
_CACHE = 8192  # trust of records read lately; ~200 bytes each


@dataclass(frozen=True, slots=True)
class Verdict:
    trust: Trust
    lifecycle: Lifecycle = Lifecycle.ACTIVE
    reason: str | None = None  # why the record is held (lifecycle draft)
    beside: str | None = None  # the trusted record a held contradiction stands beside
    claim: contradiction.Claim | None = None  # what a stored-active record states, if asked


class Firewall:
    def __init__(self, keys: WriterKeys, local_public_key: str | None) -> None:
        self.keys = keys
        self.local_public_key = local_public_key
        self._trust: dict[str, Trust] = {}
        self._generation = keys.generation()  # of the registry the cached verdicts read

    # ------------------------------------------------------------------ read side

    def trust(self, record: AMFRecord) -> Trust:
        """Never raises: a claim that no longer checks (its writer's key removed) reads as
        unverified, a malformed one (only a foreign or old record can carry it) as an
        unverified peer's.

        Give it the stored record. A redacted view (``x-redacted``: a sensitive record as
        listed) has lost the text the signature covers: it is answered from the cache when
        the stored record was assessed before, else as unverified, and never cached (that
        would stand for the stored record in every later recall)."""
        self._check_generation()
        found = self._trust.get(record.knowledge_id)
        if found is not None:
            return found
        if record.vendor_extensions.get("x-redacted") is True:
            return self._unchecked(record)
        try:
            found = self._assess(record, strict=False)
        except ValidationError:
            found = Trust(Origin.PEER, Verification.UNVERIFIED)
        if len(self._trust) >= _CACHE:
            self._trust.clear()
        self._trust[record.knowledge_id] = found
        return found

    def _unchecked(self, record: AMFRecord) -> Trust:
        """A redacted view's trust: the claimed origin, unverified (the signed text is gone);
        with no claim, this node's own when its key signed the record."""
        try:
            claim = of_record(record)
        except ValidationError:
            claim = None
        if claim is not None:
            return Trust(claim.origin, Verification.UNVERIFIED, claim.writer)
        if self._is_local(record):
            return Trust(Origin.USER, Verification.LOCAL)
        return Trust(Origin.PEER, Verification.UNVERIFIED)

    def _is_local(self, record: AMFRecord) -> bool:
        return (record.integrity.public_key is not None
                and record.integrity.public_key == self.local_public_key)

    def known(self, knowledge_id: str) -> Trust | None:
        """The trust assessed lately for ``knowledge_id``, without reading the record (a
        context pack asks for ~100 candidates it holds as stored bytes)."""
        self._check_generation()
        return self._trust.get(knowledge_id)

    def forget_cached(self) -> None:
        """Drop every cached verdict (the registry changes are also noticed by themselves)."""
        self._trust.clear()

    def _check_generation(self) -> None:
        now = self.keys.generation()
        if now != self._generation:
            self._trust.clear()
            self._generation = now

    def _assess(self, record: AMFRecord, *, strict: bool = True) -> Trust:
        """``strict`` (the write): a claim that does not check is a 403. Else (a read): it
        reads as its claimed origin, unverified."""
        text = signed_text(record)
        rules = detector.flags(text)
        heavy = density.stuffed(text)
        claim = of_record(record)
        if claim is None:
            if self._is_local(record):
                return Trust(Origin.USER, Verification.LOCAL, None, rules, heavy)
            return Trust(Origin.PEER, Verification.UNVERIFIED, None, rules, heavy)
        try:
            checked = self._verification(record, claim)
        except ForbiddenError:
            if strict:
                raise
            checked = Verification.UNVERIFIED  # e.g. its writer's key removed since
        return Trust(claim.origin, checked, claim.writer, rules, heavy)

    def _verification(self, record: AMFRecord, claim: Provenance) -> Verification:
        """Checks the claim (400/403 as ``screen`` documents)."""
        scopes = record.meta.project_scope
        if claim.signature is not None:
            if claim.writer is None:
                raise ValidationError("provenance.writer", "a signature needs the writer it is by")
            self.keys.verify(scopes, claim.writer,
                             payload(claim.writer, claim.origin.value, signed_text(record)),
                             claim.signature)
            return Verification.VERIFIED
        if claim.origin is Origin.USER:
            guarded = self.keys.guarded(scopes)
            if guarded:
                raise ForbiddenError(
                    f"provenance.signature: scope {guarded[0]!r} has writer keys registered, "
                    "so a write claiming origin 'user' must be signed by one of them"
                )
        return Verification.UNVERIFIED

    # ------------------------------------------------------------------ write side

    def screen(self, record: AMFRecord, related: Related | None = None) -> Verdict:
        """The verdict for a new record (raises 400/403 for a bad provenance claim)."""
        self._trust.pop(record.knowledge_id, None)
        claim = of_record(record)
        trust = self._assess(record) if claim is not None else self.trust(record)
        self._trust[record.knowledge_id] = trust
        users_own = trust.origin is Origin.USER and trust.verified
        if trust.instruction and not users_own:
            return Verdict(trust, Lifecycle.DRAFT,
                           "instruction-shaped (" + ", ".join(trust.instruction) + "), "
                           + trust.label().split(";")[0] + ": held until the user confirms")
        if related is None:
            return Verdict(trust)
        return self._contradiction(record, trust, related)

    @staticmethod
    def claim(record: AMFRecord) -> contradiction.Claim | None:
        """What ``record`` states the value of, if anything (``contradiction.claim_for``)."""
        return contradiction.claim_for(record, signed_text(record))

    def _contradiction(self, record: AMFRecord, trust: Trust, related: Related) -> Verdict:
        mine = self.claim(record)
        if mine is None:
            return Verdict(trust)
        named = record.causal.supersedes if record.causal else None
        for old in related(record, mine):
            if old.knowledge_id in (record.knowledge_id, named):
                continue
            theirs = self.claim(old)
            if theirs is None or not contradiction.contradicts(mine, theirs):
                continue
            held = self.trust(old)
            if trust.tier > held.tier or (trust.tier == held.tier and mine.subject):
                # More trusted than what it contradicts: stored as usual. A triple of equal
                # trust too: structured writers (capture, importers, wire clients) use a
                # subject as a category ("User.Credential.password" of two machines), and
                # one that replaces names ``causal.supersedes``; both stand meanwhile.
                continue
            why = "lower trust than" if trust.tier < held.tier else "does not supersede"
            # The reason goes into the signed log in clear: it names the attribute, never a
            # value (a sensitive record's value is encrypted at rest, and must stay so).
            return Verdict(trust, Lifecycle.DRAFT,
                           f"contradicts {old.knowledge_id} on {mine.key!r} and {why} it: "
                           "a pending candidate until the user confirms", old.knowledge_id)
        return Verdict(trust, claim=mine)


__all__ = ["Firewall", "Related", "Verdict"]
