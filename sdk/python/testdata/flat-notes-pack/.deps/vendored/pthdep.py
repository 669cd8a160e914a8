NAME = "pthdep from a .pth path"
