from freshness_pipeline.core.backoff import TICK_S, retry_wait

HOUR = 3600.0


def test_the_wait_doubles_from_the_second_failure_up_to_the_cadence() -> None:
    assert retry_wait(0, 4 * HOUR) == 0.0
    assert retry_wait(1, 4 * HOUR) == 0.0  # the next tick retries once
    assert [retry_wait(n, 4 * HOUR) / 60 for n in (2, 3, 4, 5)] == [10, 20, 40, 80]
    assert retry_wait(9, 4 * HOUR) == 4 * HOUR  # capped at the tier's cadence
    assert retry_wait(3, 0.0) == TICK_S  # a zero cadence still waits one tick
