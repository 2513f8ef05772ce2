import mlcopilot


def test_all_is_sorted_and_importable() -> None:
    assert mlcopilot.__all__ == sorted(mlcopilot.__all__)
    for name in mlcopilot.__all__:
        assert getattr(mlcopilot, name) is not None
