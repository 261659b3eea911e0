"""What a run will cost before it runs: the work counted, the seconds predicted, the calibrations."""
