"""The catalog of components, symptoms and repair actions: the one source of alert phrases.

Two families of alerts map to recommendations:

- turbofan alerts from the 21 NASA C-MAPSS sensors (``sensors``), each with a direction and a
  strength: ``sensor_alert("T30", "up", "sharp") == "hpc outlet temperature rising sharply"``;
- general plant alerts (``plant``), a component with a symptom and a strength:
  ``plant_alert("pump", "leak", "sharp") == "severe pump leak"``.

The sensor-side model emits its alerts through ``sensor_alert``, so the translator trained on the
corpus made from this package (``scripts/make_corpus.py``) has seen every phrase. A recommendation
is a function of (component, symptom or direction, strength): slight -> monitor and schedule,
moderate -> inspect, sharp -> remove from service.
"""

from seq2seq.catalog.plant import COMPONENTS, SYMPTOMS, Component, component, plant_alert, plant_recommendation
from seq2seq.catalog.sensors import (
           DIRECTIONS,
           SENSORS,
           STRENGTHS,
           Response,
           Sensor,
           recommend,
           sensor,
           sensor_alert,
           sensor_recommendation,
)

__all__ = ["COMPONENTS", "DIRECTIONS", "SENSORS", "STRENGTHS", "SYMPTOMS", "Component", "Response", "Sensor",
           "component", "plant_alert", "plant_recommendation", "recommend", "sensor", "sensor_alert",
           "sensor_recommendation"]
