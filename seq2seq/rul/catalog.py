"""The catalog of components, symptoms and repair actions: the one source of alert phrases.

Two families of alerts map to recommendations:

- turbofan alerts from the 21 NASA C-MAPSS sensors (names, descriptions and units from Saxena,
  Goebel, Simon and Eklund, "Damage Propagation Modeling for Aircraft Engine Run-to-Failure
  Simulation", PHM 2008, Table 2), each with a direction and a strength:
  ``sensor_alert("T30", "up", "sharp") == "hpc outlet temperature rising sharply"``;
- general plant alerts, a component with a symptom and a strength:
  ``plant_alert("pump", "leak", "sharp") == "severe pump leak"``.

The sensor-side model emits its alerts through ``sensor_alert``, so the translator trained on the
corpus made from this module (``scripts/make_corpus.py``) has seen every phrase. A recommendation
is a function of (component, symptom or direction, strength): slight -> monitor and schedule,
moderate -> inspect, sharp -> remove from service.
"""

from __future__ import annotations

from dataclasses import dataclass

DIRECTIONS = ("up", "down")
STRENGTHS = ("slight", "moderate", "sharp")

_TRENDS = {"up": "rising", "down": "falling"}
_ADVERBS = {"slight": "slightly", "moderate": "moderately", "sharp": "sharply"}
_SEVERITIES = {"slight": "minor", "moderate": "moderate", "sharp": "severe"}


@dataclass(frozen=True)
class Response:
    """What an alert points to and what to do about it, in canonical lower-case target words."""

    fault: str  # the likely cause, a noun phrase: "fouling and blade erosion"
    check: str  # verb phrase naming the component, done for a moderate alert: "borescope hpc stages"
    fix: str  # verb phrase naming the component, done for a sharp alert: "replace worn hpc blades"


@dataclass(frozen=True)
class Sensor:
    """One C-MAPSS sensor, the words technicians use for it and the response to each direction."""

    index: int  # 1..21, the column order of the C-MAPSS files
    symbol: str  # as printed by Saxena et al.: "T30"
    description: str  # "HPC outlet temperature"
    unit: str  # "°R", "psia", "rpm", "lbm/s", "pps/psi" or "-" for ratios
    phrase: str  # canonical lower-case alert name: "hpc outlet temperature"
    component: str  # the part it watches, as named in every recommendation: "hpc"
    aliases: tuple[str, ...]  # other names on the source side: "hpc outlet temp", "hpc exit temp"
    up: Response  # when the reading rises
    down: Response  # when the reading falls

    def response(self, direction: str) -> Response:
        """The response to a reading moving in ``direction`` ("up" or "down")."""
        return self.up if _valid(direction, DIRECTIONS, "direction") == "up" else self.down


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
        return dict(self.responses)[_valid(symptom, self.symptoms, f"symptom of {self.name}")]


R = Response

SENSORS: tuple[Sensor, ...] = (
    Sensor(1, "T2", "Fan inlet temperature", "°R", "fan inlet temperature", "engine inlet",
           ("fan inlet temp", "inlet temp", "fan inlet temp t2", "t2 temp"),
           R("hot air ingestion", "inspect engine inlet and t2 probe", "replace t2 probe and clear engine inlet"),
           R("probe icing", "test engine inlet anti-ice and t2 probe", "repair engine inlet anti-ice")),
    Sensor(2, "T24", "LPC outlet temperature", "°R", "lpc outlet temperature", "lpc",
           ("lpc outlet temp", "lpc exit temp", "booster exit temp", "t24 temp"),
           R("fouling", "wash and borescope lpc stages", "replace fouled lpc blades"),
           R("sensor drift", "check t24 sensor and lpc harness", "replace t24 sensor and lpc harness")),
    Sensor(3, "T30", "HPC outlet temperature", "°R", "hpc outlet temperature", "hpc",
           ("hpc outlet temp", "hpc exit temp", "hpc discharge temp", "t30 temp"),
           R("fouling and blade erosion", "borescope hpc stages", "replace worn hpc blades"),
           R("sensor drift", "check t30 sensor and hpc harness", "replace t30 sensor and hpc harness")),
    Sensor(4, "T50", "LPT outlet temperature", "°R", "lpt outlet temperature", "lpt",
           ("lpt outlet temp", "lpt exit temp", "egt", "exhaust gas temp"),
           R("turbine deterioration", "borescope lpt blades and nozzles", "replace damaged lpt blades"),
           R("thermocouple failure", "test lpt thermocouple harness", "replace lpt thermocouple harness")),
    Sensor(5, "P2", "Fan inlet pressure", "psia", "fan inlet pressure", "engine inlet",
           ("fan inlet press", "inlet press", "inlet pressure", "p2 press"),
           R("sensing line blockage", "check p2 line and engine inlet probe", "replace engine inlet probe"),
           R("inlet obstruction", "inspect engine inlet and fan face", "clear engine inlet and inspect fan")),
    Sensor(6, "P15", "Bypass-duct total pressure", "psia", "bypass duct pressure", "bypass duct",
           ("bypass duct press", "bypass press", "byp duct press", "p15 press"),
           R("flow restriction", "inspect bypass duct and thrust reverser", "clear bypass duct restriction"),
           R("duct leakage", "inspect bypass duct seals and panels", "replace bypass duct seals")),
    Sensor(7, "P30", "HPC outlet total pressure", "psia", "hpc outlet pressure", "hpc",
           ("hpc outlet press", "hpc discharge press", "cdp", "p30 press"),
           R("sensing line blockage", "check p30 line and hpc bleed port", "replace p30 transducer and hpc port"),
           R("efficiency loss", "borescope hpc blades and seals", "overhaul hpc module")),
    Sensor(8, "Nf", "Physical fan speed", "rpm", "fan speed", "fan",
           ("n1", "fan spd", "physical fan speed", "fan rpm"),
           R("overspeed", "verify fan speed sensor and fan trim", "replace fan speed sensor and reset fan trim"),
           R("fan blade damage", "inspect fan blades and spinner", "replace damaged fan blades")),
    Sensor(9, "Nc", "Physical core speed", "rpm", "core speed", "core",
           ("n2", "core spd", "physical core speed", "core rpm"),
           R("overspeed", "verify core speed sensor and fuel schedule", "replace core speed sensor"),
           R("bearing drag", "inspect core bearings and oil scavenge", "replace core bearings")),
    Sensor(10, "epr", "Engine pressure ratio (P50/P2)", "-", "engine pressure ratio", "gas path",
           ("eng press ratio", "pressure ratio", "epr ratio"),
           R("probe blockage", "check gas path pressure probes", "replace blocked gas path probes"),
           R("thrust loss", "perform gas path performance run", "overhaul gas path modules")),
    Sensor(11, "Ps30", "HPC outlet static pressure", "psia", "hpc outlet static pressure", "hpc",
           ("hpc static press", "hpc outlet static press", "static press hpc", "ps30 press"),
           R("stall risk", "check hpc variable stator vanes", "rig hpc variable stator vanes"),
           R("static port leak", "leak check ps30 line and hpc port", "replace ps30 line and hpc port seals")),
    Sensor(12, "phi", "Ratio of fuel flow to Ps30", "pps/psi", "fuel flow ratio", "fuel system",
           ("ff ratio", "fuel flow to ps30", "fuel ratio", "wf ratio"),
           R("metering error", "check fuel system metering valve", "replace fuel system metering valve"),
           R("nozzle coking", "inspect fuel system nozzles and filter", "replace fuel system nozzles")),
    Sensor(13, "NRf", "Corrected fan speed", "rpm", "corrected fan speed", "fan",
           ("corr fan speed", "corrected n1", "corr fan spd", "corr n1"),
           R("efficiency loss", "inspect fan blades and abradable liner", "blend fan blades and replace liner"),
           R("sensor drift", "check fan speed sensor and t2 input", "replace fan speed sensor")),
    Sensor(14, "NRc", "Corrected core speed", "rpm", "corrected core speed", "core",
           ("corr core speed", "corrected n2", "corr core spd", "corr n2"),
           R("core deterioration", "borescope core turbine and combustor", "send core module for overhaul"),
           R("rotor rub", "check core rotor tip clearances", "replace core rotor seals")),
    Sensor(15, "BPR", "Bypass ratio", "-", "bypass ratio", "bypass duct",
           ("byp ratio", "bypass rat", "bpr ratio"),
           R("core flow loss", "inspect bypass duct and core inlet", "repair core inlet and bypass duct seals"),
           R("fan flow loss", "inspect bypass duct guide vanes", "replace bypass duct guide vanes")),
    Sensor(16, "farB", "Burner fuel-air ratio", "-", "burner fuel air ratio", "combustor",
           ("burner far", "fuel air ratio", "burner f/a ratio", "far"),
           R("rich combustion", "borescope combustor liner and fuel nozzles", "replace combustor fuel nozzles"),
           R("lean flameout risk", "check combustor fuel manifold and igniters", "replace combustor fuel manifold")),
    Sensor(17, "htBleed", "Bleed enthalpy", "-", "bleed enthalpy", "bleed system",
           ("ht bleed", "bleed enth", "bleed air enthalpy", "bleed heat"),
           R("bleed valve leakage", "inspect bleed system valves and ducts", "replace leaking bleed system valve"),
           R("stuck bleed valve", "test bleed system valve actuation", "replace bleed system valve actuator")),
    Sensor(18, "Nf_dmd", "Demanded fan speed", "rpm", "demanded fan speed", "engine control unit",
           ("nf dmd", "fan speed demand", "dmd fan speed", "n1 demand"),
           R("control logic error", "check engine control unit fan schedule", "replace engine control unit"),
           R("rigging error", "check engine control unit throttle input", "re-rig engine control unit throttle")),
    Sensor(19, "PCNfR_dmd", "Demanded corrected fan speed", "rpm", "demanded corrected fan speed",
           "engine control unit",
           ("pcnfr dmd", "corr fan speed demand", "dmd corrected fan speed", "corrected n1 demand"),
           R("t2 input error", "check engine control unit t2 input", "replace t2 probe and reset engine control unit"),
           R("software fault", "read engine control unit fault codes", "reload engine control unit software")),
    Sensor(20, "W31", "HPT coolant bleed", "lbm/s", "hpt coolant bleed", "hpt",
           ("hpt cooling flow", "hpt coolant flow", "hpt clg bleed", "hpt cooling air"),
           R("cooling air leak", "inspect hpt cooling air seals", "replace hpt cooling air seals"),
           R("blocked cooling holes", "borescope hpt blades and cooling holes", "replace hpt blades")),
    Sensor(21, "W32", "LPT coolant bleed", "lbm/s", "lpt coolant bleed", "lpt",
           ("lpt cooling flow", "lpt coolant flow", "lpt clg bleed", "lpt cooling air"),
           R("seal leakage", "inspect lpt cooling air seals", "replace lpt cooling air seals"),
           R("cooling flow restriction", "inspect lpt cooling air ducts", "clear lpt cooling air ducts")),
)

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


def sensor(key: int | str) -> Sensor:
    """The sensor with 1-based ``index`` or ``symbol`` (any case); KeyError lists the symbols."""
    for candidate in SENSORS:
        if key == candidate.index or (isinstance(key, str) and key.lower() == candidate.symbol.lower()):
            return candidate
    symbols = ", ".join(s.symbol for s in SENSORS)
    raise KeyError(f"unknown sensor {key!r}; valid: 1..{len(SENSORS)} or one of {symbols}")


def component(name: str) -> Component:
    """The plant component called ``name`` (canonical name, any case); KeyError lists the names."""
    for candidate in COMPONENTS:
        if name.lower() == candidate.name:
            return candidate
    raise KeyError(f"unknown component {name!r}; valid: {', '.join(c.name for c in COMPONENTS)}")


def sensor_alert(key: int | str, direction: str, strength: str) -> str:
    """The canonical alert, e.g. ``"hpc outlet temperature rising sharply"``."""
    trend = _TRENDS[_valid(direction, DIRECTIONS, "direction")]
    return f"{sensor(key).phrase} {trend} {_ADVERBS[_valid(strength, STRENGTHS, 'strength')]}"


def sensor_recommendation(key: int | str, direction: str, strength: str) -> str:
    """The canonical recommendation for ``sensor_alert(key, direction, strength)``."""
    return recommend(sensor(key).response(direction), strength, "engine")


def plant_alert(name: str, symptom: str, strength: str) -> str:
    """The canonical plant alert, e.g. ``"severe pump leak"``."""
    found = component(name)
    found.response(symptom)
    return f"{_SEVERITIES[_valid(strength, STRENGTHS, 'strength')]} {found.name} {symptom}"


def plant_recommendation(name: str, symptom: str, strength: str) -> str:
    """The canonical recommendation for ``plant_alert(name, symptom, strength)``."""
    found = component(name)
    return recommend(found.response(symptom), strength, found.name)


def recommend(response: Response, strength: str, unit: str) -> str:
    """The recommendation for ``response`` at ``strength``; a sharp alert takes ``unit`` out of service."""
    _valid(strength, STRENGTHS, "strength")
    if strength == "slight":
        return f"monitor {response.fault} and schedule maintenance to {response.check}"
    if strength == "moderate":
        return f"{response.check} for {response.fault}"
    return f"remove {unit} from service and {response.fix}"


def _valid(value: str, choices: tuple[str, ...], what: str) -> str:
    if value not in choices:
        raise ValueError(f"unknown {what} {value!r}; valid: {', '.join(choices)}")
    return value
