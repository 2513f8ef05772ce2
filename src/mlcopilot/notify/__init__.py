"""Notification behaviour: grouping, policy, the outbox codec, the relay, acks and the sinks.

Deliberately imports nothing: the modules sit on different layers (the codec under
``protocols``, the relay over the sinks), so each is imported by its full path.
"""
