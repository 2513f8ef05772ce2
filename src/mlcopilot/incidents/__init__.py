"""The incident decisions, pure: lifecycle, write-back plan, grouping, policy, gate.

And what they hand on: the outbox payload (payload.py) the store writes and the relay reads.
"""
