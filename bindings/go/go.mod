module vyrecuda

go 1.19
