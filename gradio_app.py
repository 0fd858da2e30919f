"""Technician UI (placeholder until the UI issue): type alerts, read recommendations.

    python gradio_app.py [--model runs/embedded/best.pt] [--host 127.0.0.1] [--port 7860]

Binds 127.0.0.1 unless --host says otherwise. The full UI (heatmaps, engine health, batch upload)
is the subject of a later issue.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

DEFAULT_MODEL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runs", "embedded", "best.pt")


def build(model_path: str = DEFAULT_MODEL):
    import gradio as gr

    from seq2seq.recommender import Recommender

    recommender = Recommender.from_checkpoint(model_path)

    def recommend(text: str) -> str:
        lines = [line for line in text.splitlines() if line.strip()]
        if not lines:
            raise gr.Error("Type at least one alert.")
        return "\n".join(recommender.translate(lines))

    with gr.Blocks(title="Maintenance recommendations") as demo:
        alerts = gr.Textbox(label="Alerts, one per line", lines=4, elem_id="alerts")
        button = gr.Button("Recommend", elem_id="recommend")
        output = gr.Textbox(label="Recommendations", lines=4, elem_id="output")
        button.click(recommend, alerts, output, api_name="recommend")
    return demo


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=7860)
    args = parser.parse_args()
    build(args.model).launch(server_name=args.host, server_port=args.port, max_file_size="5mb")


if __name__ == "__main__":
    main()
