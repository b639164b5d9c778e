"""Fail-closed verification of canaries (behavior), and the ddmin baseline it refuses."""
