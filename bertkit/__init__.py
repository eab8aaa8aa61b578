"""The application: the `bertkit` command's dispatch (`bertkit.cli`) and the demo
(`bertkit.demo`). The only package that imports both the Beam stages (`pipelines/`) and the
trainer (`trainer/`); nothing below it imports it."""
