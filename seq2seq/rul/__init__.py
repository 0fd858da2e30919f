"""Sensor side: remaining-useful-life model on C-MAPSS turbofan data, and the alerts it raises."""
