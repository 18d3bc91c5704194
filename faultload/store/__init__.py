"""What a trial leaves behind and how it is shown: reports, plots, repro files."""
