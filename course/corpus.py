"""The texts the course trains on, shipped inside the package: read from disk, never from the network."""

from pathlib import Path

__all__ = ["KIEU_PATH", "kieu_lines"]

KIEU_PATH = Path(__file__).parent / "data" / "truyen_kieu.txt"


def kieu_lines():
    """The 3,254 lines of Nguyễn Du's Truyện Kiều (1820), Unicode NFC, in order: 6 and 8 syllables alternating."""
    return KIEU_PATH.read_text(encoding="utf-8").splitlines()
