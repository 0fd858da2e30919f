from seq2seq.cli import command

if __name__ == "__main__":  # not when a spawned process (train.parallel) imports it
    raise SystemExit(command())
