"""What a person reads: short names from urns, plural wording, text made safe to show."""
