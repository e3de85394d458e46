from freshness_pipeline.core.in_flight import BUSY, IDLE, MIN_EPOCH, epoch, next_size


def test_a_cpu_bound_window_halves_down_to_one() -> None:
    sizes = [8]
    while sizes[-1] > 1:
        sizes.append(next_size(sizes[-1], 8, cpu_s=1.0, wall_s=1.0))
    assert sizes == [8, 4, 2, 1]
    assert next_size(1, 8, cpu_s=1.0, wall_s=1.0) == 1


def test_a_window_waiting_on_the_network_grows_by_one_up_to_the_limit() -> None:
    assert next_size(1, 8, cpu_s=0.1, wall_s=1.0) == 2
    assert next_size(7, 8, cpu_s=0.1, wall_s=1.0) == 8
    assert next_size(8, 8, cpu_s=0.0, wall_s=1.0) == 8


def test_between_the_thresholds_the_window_holds() -> None:
    between = (BUSY + IDLE) / 2
    assert next_size(3, 8, cpu_s=between, wall_s=1.0) == 3
    assert next_size(3, 8, cpu_s=BUSY, wall_s=1.0) == 3  # at BUSY: not above it
    assert next_size(3, 8, cpu_s=IDLE, wall_s=1.0) == 3


def test_no_time_passed_decides_nothing_and_a_window_never_passes_its_limit() -> None:
    assert next_size(5, 8, cpu_s=1.0, wall_s=0.0) == 5
    assert next_size(8, 4, cpu_s=0.8, wall_s=1.0) == 4  # a lower limit than the size: held to it
    assert next_size(8, 4, cpu_s=1.0, wall_s=1.0) == 2


def test_an_epoch_lets_each_request_in_flight_end_about_twice() -> None:
    assert epoch(1) == MIN_EPOCH
    assert epoch(32) == 64
