SELECT 1;
  \setshell x echo 1
