"""The 21 NASA C-MAPSS sensors, the words technicians use for them and what to do when one drifts.

Names, descriptions and units from Saxena, Goebel, Simon and Eklund, "Damage Propagation Modeling
for Aircraft Engine Run-to-Failure Simulation", PHM 2008, Table 2. An alert is a sensor with a
direction and a strength: ``sensor_alert("T30", "up", "sharp") == "hpc outlet temperature rising
sharply"``. A recommendation is a function of (component, direction, strength): slight -> monitor
and schedule, moderate -> inspect, sharp -> remove from service (``recommend``, shared with the
plant catalog).
"""

from __future__ import annotations

from dataclasses import dataclass

DIRECTIONS = ("up", "down")
STRENGTHS = ("slight", "moderate", "sharp")

_TRENDS = {"up": "rising", "down": "falling"}
_ADVERBS = {"slight": "slightly", "moderate": "moderately", "sharp": "sharply"}


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
        return self.up if valid(direction, DIRECTIONS, "direction") == "up" else self.down


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


def sensor(key: int | str) -> Sensor:
    """The sensor with 1-based ``index`` or ``symbol`` (any case); KeyError lists the symbols."""
    for candidate in SENSORS:
        if key == candidate.index or (isinstance(key, str) and key.lower() == candidate.symbol.lower()):
            return candidate
    symbols = ", ".join(s.symbol for s in SENSORS)
    raise KeyError(f"unknown sensor {key!r}; valid: 1..{len(SENSORS)} or one of {symbols}")


def sensor_alert(key: int | str, direction: str, strength: str) -> str:
    """The canonical alert, e.g. ``"hpc outlet temperature rising sharply"``."""
    trend = _TRENDS[valid(direction, DIRECTIONS, "direction")]
    return f"{sensor(key).phrase} {trend} {_ADVERBS[valid(strength, STRENGTHS, 'strength')]}"


def sensor_recommendation(key: int | str, direction: str, strength: str) -> str:
    """The canonical recommendation for ``sensor_alert(key, direction, strength)``."""
    return recommend(sensor(key).response(direction), strength, "engine")


def recommend(response: Response, strength: str, unit: str) -> str:
    """The recommendation for ``response`` at ``strength``; a sharp alert takes ``unit`` out of service."""
    valid(strength, STRENGTHS, "strength")
    if strength == "slight":
        return f"monitor {response.fault} and schedule maintenance to {response.check}"
    if strength == "moderate":
        return f"{response.check} for {response.fault}"
    return f"remove {unit} from service and {response.fix}"


def valid(value: str, choices: tuple[str, ...], what: str) -> str:
    """``value`` if it is one of ``choices``; ValueError naming ``what`` and the valid choices."""
    if value not in choices:
        raise ValueError(f"unknown {what} {value!r}; valid: {', '.join(choices)}")
    return value
