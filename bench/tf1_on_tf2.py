"""Run a TensorFlow 1 script, as it was checked out, on TensorFlow 2.

    WORKDIR/google-bert-venv/bin/python bench/tf1_on_tf2.py \\
        BERT_DIR/create_pretraining_data.py --input_file=… --output_file=… --vocab_file=…

google-research/bert's create_pretraining_data.py and tokenization.py say `import tensorflow
as tf` and use the TF1 API (tf.flags, tf.app, tf.gfile, tf.logging, tf.python_io,
tf.train.Example), which TensorFlow 2 keeps, unchanged, as `tensorflow.compat.v1`. This
launcher imports that module and registers it under the name `tensorflow`, so both files'
`import tensorflow as tf` get it, then runs the script as `__main__` with its own folder
first on sys.path (for its `import tokenization`). Not a line of their code is changed or
copied here: the algorithm and the TensorFlow that runs it are theirs.

bench.examples runs it with the Python of its TensorFlow venv (bench.venvs), never bertkit's:
it imports nothing of bertkit or bench.
"""

import runpy
import sys
from pathlib import Path


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit("usage: python bench/tf1_on_tf2.py SCRIPT.py [the script's flags]")
    script = Path(sys.argv[1]).resolve()
    if not script.is_file():
        sys.exit(f"{script}: no such script (pass the path of a TensorFlow 1 script)")
    import tensorflow.compat.v1 as tf  # here: it exists only in the TensorFlow venv

    sys.modules["tensorflow"] = tf
    # The script's folder replaces bench/ (this file's) as the first place imports look.
    sys.path[0] = str(script.parent)
    sys.argv = [str(script), *sys.argv[2:]]
    runpy.run_path(str(script), run_name="__main__")


if __name__ == "__main__":
    main()
