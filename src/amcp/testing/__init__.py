"""Test and benchmark tooling that ships with amcp: the fault-injection proxy."""
