"""Helpers shared by the test tiers (imported, never collected: no test_ modules here)."""
