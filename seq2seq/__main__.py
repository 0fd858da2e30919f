from seq2seq.cli import main

if __name__ == "__main__":  # not when a spawned process (train.parallel) imports it
    raise SystemExit(main())
