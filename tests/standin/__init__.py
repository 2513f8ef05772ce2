"""Tests of the DataHub stand-in (``standin/``), kept apart from it as tests mirror their code."""
