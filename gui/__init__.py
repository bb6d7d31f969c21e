"""Qt front end: the main window and the window output."""
