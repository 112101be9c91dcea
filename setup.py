"""Maps the top-level folders to ccattler.<folder> (metadata lives in pyproject.toml)."""

from setuptools import find_namespace_packages, setup

FOLDERS = ["engine", "dsl", "rules", "agent", "bpf", "cli", "deploy"]

packages = [
    f"ccattler.{name}"
    for name in find_namespace_packages(include=[f"{folder}*" for folder in FOLDERS])
    if "__pycache__" not in name
]

setup(packages=packages)
