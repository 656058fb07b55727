"""leasefence: formal-model-first verification of reboot-safe lease fencing (design note F314)."""

__version__ = "0.1.0"
