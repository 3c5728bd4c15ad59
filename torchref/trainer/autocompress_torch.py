"""autocompress reference trainer (skeleton; the torchref engineer fills it in).

Usage: python3 autocompress_torch.py CONTRACT.json
"""
import sys

if __name__ == "__main__":
    sys.stderr.write("autocompress_torch: not built yet\n")
    sys.exit(3)
