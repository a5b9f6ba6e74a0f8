"""`bench calibrate`: measure the real stack and write the simulator's cost and measurement profile."""
