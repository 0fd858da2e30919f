"""General plant equipment: components, their symptoms and the response to each.

A plant alert is a component with a symptom and a strength: ``plant_alert("pump", "leak", "sharp")
== "severe pump leak"``; its recommendation follows the same strength rule as a sensor's.
"""

from __future__ import annotations

from dataclasses import dataclass

from seq2seq.catalog.sensors import STRENGTHS, Response, recommend, valid

_SEVERITIES = {"slight": "minor", "moderate": "moderate", "sharp": "severe"}


@dataclass(frozen=True)
class Component:
    """A piece of plant equipment, its source-side names and its response to each symptom."""

    name: str  # canonical lower-case name used in alerts and recommendations: "pump"
    aliases: tuple[str, ...]  # other names on the source side: "pmp", "#2 pump"
    responses: tuple[tuple[str, Response], ...]  # (symptom, response), symptoms from SYMPTOMS

    @property
    def symptoms(self) -> tuple[str, ...]:
        """The symptoms this component can raise, in catalog order."""
        return tuple(symptom for symptom, _ in self.responses)

    def response(self, symptom: str) -> Response:
        """The response to ``symptom``; ValueError lists the symptoms this component has."""
        return dict(self.responses)[valid(symptom, self.symptoms, f"symptom of {self.name}")]


R = Response

# Source-side phrasings of each plant symptom; the first is the canonical one used by plant_alert.
SYMPTOMS: dict[str, tuple[str, ...]] = {
    "leak": ("leak", "leakage", "leaking", "leak detected", "fluid leak", "pressure drop and leakage"),
    "vibration": ("vibration", "vibration rise", "high vibration", "vib", "vibration increase", "shaking"),
    "overheating": ("overheating", "overheat", "high temp", "temperature rise", "running hot", "hot spot"),
    "noise": ("noise", "abnormal noise", "grinding noise", "squeal", "unusual sound", "knocking"),
    "pressure drop": ("pressure drop", "low pressure", "press drop", "loss of pressure", "pressure loss"),
    "contamination": ("contamination", "contaminated", "contamination alert", "dirty fluid", "particles found"),
    "wear": ("wear", "worn", "wear detected", "wear indication", "wear limit reached"),
    "misalignment": ("misalignment", "misaligned", "alignment fault", "out of alignment", "misalign"),
}

COMPONENTS: tuple[Component, ...] = (
    Component("pump", ("pmp", "#2 pump", "feed pump", "transfer pump", "pump 3"), (
        ("leak", R("seal leakage", "check pump seals and tighten fittings", "replace pump mechanical seal")),
        ("vibration", R("impeller imbalance", "inspect pump impeller and mounting bolts", "replace pump impeller")),
        ("overheating", R("dry running", "check pump suction supply and flow", "replace pump seals and bearings")),
        ("noise", R("cavitation", "check pump suction pressure and strainer", "replace pump impeller and strainer")),
        ("pressure drop", R("impeller wear", "measure pump discharge pressure", "replace worn pump impeller")),
    )),
    Component("motor", ("mtr", "electric motor", "drive motor", "#1 motor", "fan motor"), (
        ("vibration", R("rotor imbalance", "check motor balance and mounting bolts", "rebalance motor rotor")),
        ("overheating", R("winding overload", "check motor current and cooling fan", "rewind or replace motor")),
        ("noise", R("bearing damage", "inspect and lubricate motor bearings", "replace motor bearings")),
        ("misalignment", R("coupling misalignment", "check motor coupling alignment", "re-align motor coupling")),
    )),
    Component("bearing", ("brg", "bearings", "motor bearings", "shaft bearing", "main brg"), (
        ("vibration", R("bearing wear", "check bearing lubrication and clearance", "replace bearing and check shaft")),
        ("overheating", R("lubrication failure", "check bearing grease level", "replace bearing and regrease")),
        ("noise", R("race damage", "perform bearing vibration analysis", "replace bearing")),
        ("wear", R("excess clearance", "measure bearing clearance", "replace worn bearing")),
        ("contamination", R("dirty lubricant", "sample bearing grease", "flush bearing housing and regrease")),
    )),
    Component("hydraulic", ("hydraulics", "hyd", "hyd system", "hydraulic system", "hyd unit"), (
        ("leak", R("fitting leakage", "check and tighten hydraulic fittings", "replace leaking hydraulic hoses")),
        ("pressure drop", R("internal leakage", "check hydraulic pump and relief valve", "repair hydraulic pump")),
        ("contamination", R("fluid contamination", "sample hydraulic fluid and filters", "flush hydraulic system")),
        ("overheating", R("cooler blockage", "check hydraulic oil cooler and level", "clean hydraulic oil cooler")),
        ("noise", R("pump cavitation", "check hydraulic reservoir level", "replace hydraulic pump")),
    )),
    Component("coolant", ("coolant system", "cooling system", "coolant loop", "clnt", "coolant circuit"), (
        ("leak", R("hose leakage", "pressure test coolant hoses and clamps", "replace leaking coolant hoses")),
        ("contamination", R("coolant contamination", "sample coolant and check concentration",
                            "flush and refill coolant system")),
        ("overheating", R("low coolant flow", "check coolant level and pump", "replace coolant pump and thermostat")),
        ("pressure drop", R("coolant loss", "check coolant level and cap", "refill coolant and repair leak")),
    )),
    Component("air compressor", ("compressor", "air comp", "comp", "screw compressor", "#2 compressor"), (
        ("overheating", R("cooler fouling", "clean air compressor cooler", "replace air compressor oil and cooler")),
        ("vibration", R("loose mounting", "check air compressor mounts", "replace air compressor mounts")),
        ("pressure drop", R("air leakage", "leak test air compressor lines", "repair air compressor lines")),
        ("noise", R("valve damage", "inspect air compressor valves", "replace air compressor valves")),
        ("contamination", R("oil carryover", "check air compressor separator", "replace air compressor separator")),
    )),
    Component("valve", ("vlv", "control valve", "#3 valve", "isolation valve", "valve 2"), (
        ("leak", R("seat leakage", "inspect valve seat and packing", "replace valve seat and packing")),
        ("noise", R("valve chatter", "check valve actuator and positioner", "replace valve actuator")),
        ("wear", R("trim wear", "inspect valve trim", "replace worn valve trim")),
        ("pressure drop", R("partial blockage", "check valve stroke", "overhaul valve")),
    )),
    Component("filter", ("fltr", "oil filter", "inlet filter", "filter element", "strainer"), (
        ("pressure drop", R("clogging", "check filter differential pressure", "replace filter element")),
        ("contamination", R("debris loading", "inspect filter element", "replace filter and flush housing")),
        ("leak", R("housing seal leakage", "check filter housing seal", "replace filter housing seal")),
    )),
    Component("belt", ("drive belt", "v-belt", "blt", "fan belt", "belt drive"), (
        ("wear", R("belt cracking", "inspect belt surface and tension", "replace drive belt")),
        ("misalignment", R("pulley misalignment", "check belt pulley alignment", "re-align pulleys and replace belt")),
        ("noise", R("belt slip", "check belt tension", "replace belt and re-tension drive")),
        ("vibration", R("loose belt", "check belt tension and pulleys", "replace belt and idler pulley")),
    )),
    Component("gearbox", ("gbx", "gear box", "reducer", "gearbox #1", "gear unit"), (
        ("vibration", R("gear tooth wear", "perform gearbox vibration analysis", "replace worn gearbox gears")),
        ("overheating", R("low oil level", "check gearbox oil level and breather", "drain and refill gearbox oil")),
        ("noise", R("tooth damage", "inspect gearbox gears", "replace damaged gearbox gears")),
        ("leak", R("seal leakage", "check gearbox shaft seals", "replace gearbox shaft seals")),
        ("contamination", R("wear metal in oil", "sample gearbox oil", "flush gearbox and replace oil")),
        ("misalignment", R("shaft misalignment", "check gearbox shaft alignment", "re-align gearbox coupling")),
    )),
    Component("electrical panel", ("elec panel", "switchgear", "mcc", "breaker panel", "control panel"), (
        ("overheating", R("loose connection", "thermal scan electrical panel", "retighten electrical panel terminals")),
        ("noise", R("arcing", "inspect electrical panel contacts", "replace electrical panel breaker")),
        ("contamination", R("dust and moisture", "clean and dry electrical panel", "seal electrical panel enclosure")),
        ("wear", R("contact wear", "inspect electrical panel contactors", "replace electrical panel contactors")),
    )),
)


def component(name: str) -> Component:
    """The plant component called ``name`` (canonical name, any case); KeyError lists the names."""
    for candidate in COMPONENTS:
        if name.lower() == candidate.name:
            return candidate
    raise KeyError(f"unknown component {name!r}; valid: {', '.join(c.name for c in COMPONENTS)}")


def plant_alert(name: str, symptom: str, strength: str) -> str:
    """The canonical plant alert, e.g. ``"severe pump leak"``."""
    found = component(name)
    found.response(symptom)
    return f"{_SEVERITIES[valid(strength, STRENGTHS, 'strength')]} {found.name} {symptom}"


def plant_recommendation(name: str, symptom: str, strength: str) -> str:
    """The canonical recommendation for ``plant_alert(name, symptom, strength)``."""
    found = component(name)
    return recommend(found.response(symptom), strength, found.name)
