"""Print the README's dataset table: python scripts/dataset_table.py [names...] (default: every dataset).

Makes each dataset at full size if it is not cached yet, then reports what `python -m minirl dataset info` reports.
"""
import platform
import sys
import time

from minirl import datasets


def main(names):
    print("| dataset | transitions | episodes | return mean (min / max) | normalised score |")
    print("| --- | ---: | ---: | --- | ---: |")
    t0 = time.time()
    for name in names:
        i = datasets.dataset_info(name, progress=False)
        print(f"| `{name}` | {i['transitions']:,} | {i['episodes']:,} | {i['return_mean']:.1f} "
              f"({i['return_min']:.1f} / {i['return_max']:.1f}) | {i['normalized_score_mean']:.1f} |")
    print(f"\n(made on {platform.machine()} {platform.python_version()}, {time.time() - t0:.0f} s including cached ones)",
          file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:] or datasets.dataset_names())
